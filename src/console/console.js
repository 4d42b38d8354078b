// Keeps a console page live. The server says on /events when the fleet
// changed and which applications (server-sent events, batched); a page the
// change concerns then fetches itself and swaps in each element marked
// data-live, leaving the filter form and any button as the user left them. One fetch at a time: changes that arrive
// during one are caught by one more. No framework: the browser's
// EventSource, fetch and DOMParser do all of it.
"use strict";
// Copy YAML: the editor's text to the clipboard, for Git.
document.addEventListener("click", function (event) {
  const button = event.target.closest("[data-copy]");
  if (!button) {
    return;
  }
  const source = document.getElementById(button.dataset.copy);
  if (source && navigator.clipboard) {
    navigator.clipboard.writeText(source.value).then(function () {
      button.dataset.copied = "true";
      button.textContent = "Copied";
    });
  }
});
// The editor: the pools the YAML selects, asked for again a moment after
// each change of the text.
(function () {
  const selected = document.querySelector("[data-selected-pools]");
  const form = selected && selected.closest("form");
  if (!form) {
    return;
  }
  let timer = null;
  async function ask() {
    try {
      const response = await fetch(selected.dataset.selectedPools, {
        method: "POST",
        credentials: "same-origin",
        body: new URLSearchParams(new FormData(form)),
      });
      if (response.ok) {
        const next = new DOMParser().parseFromString(await response.text(), "text/html");
        const fresh = next.querySelector("[data-selected-pools]");
        const old = document.querySelector("[data-selected-pools]");
        if (fresh && old) {
          old.replaceWith(document.adoptNode(fresh));
        }
      }
    } catch (e) {
      // The next change asks again.
    }
  }
  form.querySelector("textarea").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(ask, 400);
  });
  ask();
})();
(function () {
  if (!document.querySelector("[data-live]") || !window.EventSource) {
    return;
  }
  let fetching = false;
  let again = false;
  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      const response = await fetch(window.location.href, { cache: "no-store", credentials: "same-origin" });
      if (response.ok) {
        const next = new DOMParser().parseFromString(await response.text(), "text/html");
        for (const fresh of next.querySelectorAll("[data-live]")) {
          const old = document.querySelector('[data-live="' + fresh.dataset.live + '"]');
          if (old) {
            old.replaceWith(document.adoptNode(fresh));
          }
        }
        document.body.dataset.refreshed = String(Date.now());
      }
    } catch (e) {
      // The next event tries again.
    } finally {
      fetching = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }
  // An event names the applications that changed ("*": any may have). A
  // page of one application follows that one only; the landing page, all.
  const mine = document.body.dataset.app;
  function concerned(event) {
    return !mine || event.data === "*" || event.data.split(" ").includes(mine);
  }
  const events = new EventSource("/events");
  events.addEventListener("fleet", function (event) {
    if (concerned(event)) {
      refresh();
    }
  });
  events.addEventListener("open", function () {
    document.body.dataset.stream = "open";
  });
  // Refused (too many live pages open: 429) or gone for good: the page
  // works on without live updates, and a reload refreshes it.
  events.addEventListener("error", function () {
    if (events.readyState === EventSource.CLOSED) {
      document.body.dataset.stream = "closed";
    }
  });
})();
