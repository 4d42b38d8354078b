{{- define "ingress-gateway.labels" -}}
app.kubernetes.io/name: ingress-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
