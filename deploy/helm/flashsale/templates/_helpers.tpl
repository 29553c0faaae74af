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

{{/* The masters' addresses, host:port, every one by its stable name in
ordinal order, the same order for every replica (node 0 holds lua+fence's
counter). At least three: with none the app would start nodes of its own in
each replica and lock against itself. */}}
{{- define "flashsale.redisHosts" -}}
{{- $n := int .Values.redis.nodes }}
{{- if or (lt $n 3) (eq (mod $n 2) 0) }}
{{- fail (printf "redis.nodes: %d; Redlock needs an odd number of masters, at least 3 (5: two may be down)" $n) }}
{{- end }}
{{- $name := include "flashsale.redisName" . }}
{{- $hosts := list }}
{{- range $i := until $n }}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc:%d" $name $i $name $.Release.Namespace (int $.Values.redis.port)) }}
{{- end }}
{{- join "," $hosts }}
{{- end }}

{{/* FLASHSALE_REDIS: every master as the app's ACL user, its password
interpolated by the kubelet from REDIS_PASSWORD (a Secret), never written
into the pod spec. */}}
{{- define "flashsale.redisURLs" -}}
{{- $scheme := ternary "rediss" "redis" .Values.redis.tls.enabled }}
{{- $urls := list }}
{{- range $h := splitList "," (include "flashsale.redisHosts" .) }}
{{- $urls = append $urls (printf "%s://flashsale:$(REDIS_PASSWORD)@%s" $scheme $h) }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{/* The Secret holding the masters' two passwords (app-password,
admin-password). */}}
{{- define "flashsale.redisSecretName" -}}
{{- .Values.redis.auth.existingSecret | default (printf "%s-redis-auth" (include "flashsale.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{/* The settings every replica of a rollout must share: where the lock
lives (the masters, their count, TLS), which lock (the variant and the
production guards) and under which keys (FLASHSALE_NAMESPACE). Two replicas
that differ in one can both hold a lock: 3 of nodes 0-4 and 4 of nodes 0-6
are two quorums that need not meet. */}}
{{- define "flashsale.sharedSettings" -}}
{{- dict "redis" (include "flashsale.redisHosts" .) "tls" .Values.redis.tls.enabled "lock" .Values.app.lock "production" .Values.app.production "namespace" (get .Values.app.extraEnv "FLASHSALE_NAMESPACE" | toString) | toJson }}
{{- end }}

{{- define "flashsale.sharedHash" -}}
{{- include "flashsale.sharedSettings" . | sha256sum | trunc 16 }}
{{- end }}

{{/* The pod-level securityContext of every pod: the "restricted" Pod
Security level (non-root, RuntimeDefault seccomp), the image's own user. */}}
{{- define "flashsale.podSecurity" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The container-level securityContext of every container. */}}
{{- define "flashsale.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: {{ .readOnly }}
capabilities:
  drop: ["ALL"]
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
{{/* imagePullSecrets of every pod (the app's, Redis', PostgreSQL's, the test's). */}}
{{- define "flashsale.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
