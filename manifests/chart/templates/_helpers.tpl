{{/* Labels of every object. Names are fixed (one agent per cluster), not
derived from the release name, so they match the Kustomize base. */}}
{{- define "flotilla-agent.labels" -}}
app.kubernetes.io/name: flotilla-agent
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "flotilla-agent.selectorLabels" -}}
app.kubernetes.io/name: flotilla-agent
{{- end }}

{{- define "flotilla-agent.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "flotilla-agent.podSecurityLevel" -}}
{{- if .Values.podSecurityLevel -}}
{{ .Values.podSecurityLevel }}
{{- else if .Values.cache.hostPath -}}
privileged
{{- else -}}
restricted
{{- end -}}
{{- end }}

{{- define "flotilla-agent.validate" -}}
{{- if not (has .Values.rbac.scope (list "cluster" "namespaced")) -}}
{{- fail (printf "rbac.scope %q: want cluster or namespaced" .Values.rbac.scope) -}}
{{- end -}}
{{- if regexMatch "^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@" .Values.git.repoURL -}}
{{- fail "git.repoURL must not hold credentials (they would land in a ConfigMap): use the git.credentials Secret" -}}
{{- end -}}
{{- end }}
