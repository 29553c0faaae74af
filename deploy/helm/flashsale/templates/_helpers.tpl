{{/* Names, labels and the values several objects derive from. */}}

{{- define "flashsale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flashsale.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "flashsale.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "flashsale.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "flashsale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "flashsale.selector" . }}
{{- end }}

{{/* Selector labels; "component" is added by each object (app, redis, postgres). */}}
{{- define "flashsale.selector" -}}
app.kubernetes.io/name: {{ include "flashsale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The app's image: a pinned tag, never "latest" or none. */}}
{{- define "flashsale.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString }}
{{- if or (eq $tag "latest") (eq $tag "") }}
{{- fail "image.tag: give a fixed tag (a release or a commit), not latest: every replica must run the same build" }}
{{- end }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}

{{/* The Secret holding the admin token and the database URL. */}}
{{- define "flashsale.secretName" -}}
{{- include "flashsale.fullname" . }}
{{- end }}

{{- define "flashsale.redisName" -}}
{{- printf "%s-redis" (include "flashsale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flashsale.postgresName" -}}
{{- printf "%s-postgres" (include "flashsale.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* FLASHSALE_REDIS: every master by its stable name, in ordinal order, the
same order for every replica (node 0 holds lua+fence's counter). */}}
{{- define "flashsale.redisURLs" -}}
{{- $name := include "flashsale.redisName" . }}
{{- $urls := list }}
{{- range $i := until (int .Values.redis.nodes) }}
{{- $urls = append $urls (printf "redis://%s-%d.%s.%s.svc:%d" $name $i $name $.Release.Namespace (int $.Values.redis.port)) }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{/* Seconds of a Go duration such as "5s", "1m30s" or "500ms", rounded up. */}}
{{- define "flashsale.seconds" -}}
{{- $d := . | toString }}
{{- $total := 0.0 }}
{{- range $m := regexFindAll "[0-9.]+(ms|s|m|h)" $d -1 }}
{{- $n := regexFind "[0-9.]+" $m | float64 }}
{{- $unit := regexFind "(ms|s|m|h)$" $m }}
{{- if eq $unit "ms" }}{{ $total = addf $total (divf $n 1000) }}
{{- else if eq $unit "s" }}{{ $total = addf $total $n }}
{{- else if eq $unit "m" }}{{ $total = addf $total (mulf $n 60) }}
{{- else }}{{ $total = addf $total (mulf $n 3600) }}{{ end }}
{{- end }}
{{- ceil $total | int }}
{{- end }}
