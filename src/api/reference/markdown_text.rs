//! Text as Markdown: code spans, paragraphs and table cells, HTML
//! escaped, and the anchors GitHub gives headings.

pub(super) fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// JSON on one line.
pub(super) fn compact(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

pub(super) fn plural(n: impl TryInto<i64>) -> &'static str {
    match n.try_into() {
        Ok(1) => "",
        _ => "s",
    }
}

pub(super) fn code_list(items: &[String]) -> String {
    items.iter().map(|i| code(i)).collect::<Vec<_>>().join(", ")
}

/// Text as code in a table cell: a backtick inside is fenced by two, and
/// a pipe escaped so that it does not end the cell.
pub(super) fn code(text: &str) -> String {
    let text = text.replace('|', "\\|");
    match text.contains('`') {
        true => format!("`` {text} ``"),
        false => format!("`{text}`"),
    }
}

/// A description as one paragraph outside a table: the lines of a doc
/// comment joined, its paragraphs apart.
pub(super) fn paragraph(text: &str) -> String {
    text.split("\n\n")
        .map(|p| escape_html(&p.split_whitespace().collect::<Vec<_>>().join(" ")))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("<br><br>")
}

/// A description in a table cell: one line, its pipes escaped.
pub(super) fn cell(text: &str) -> String {
    paragraph(text).replace('|', "\\|")
}

/// `<` and `>` outside code spans as entities, so that `<pool>` in prose is
/// not read as an HTML tag.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// The anchor GitHub gives a heading: lower case, letters, digits, `-` and
/// `_` kept, spaces as `-`, the rest dropped.
pub fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}
