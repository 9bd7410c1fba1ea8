{{/* Labels shared by every object; "component" is passed in. */}}
{{- define "foresize.labels" -}}
app.kubernetes.io/name: foresize
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: foresize
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "foresize.selector" -}}
app.kubernetes.io/name: foresize
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "foresize.image" -}}
{{- $why := "image.repository is required: no Foresize image is published. Build and push one from a checkout (docker build -t REGISTRY/foresize:TAG . && docker push REGISTRY/foresize:TAG; see docs/install.md), then --set image.repository=REGISTRY/foresize --set image.tag=TAG" -}}
{{ required $why .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "foresize.excludedNamespaces" -}}
{{- $ns := .Values.webhook.excludedNamespaces | default list -}}
{{- if not (has .Release.Namespace $ns) -}}{{- $ns = append $ns .Release.Namespace -}}{{- end -}}
{{- toJson $ns -}}
{{- end -}}
