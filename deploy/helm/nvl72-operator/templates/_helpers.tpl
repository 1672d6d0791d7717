{{/* SPDX-License-Identifier: Apache-2.0 */}}
{{/* Names and labels shared by every template of the chart. */}}

{{- define "nvl72.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name: Service, Secret, Lease and webhook names derive from it. */}}
{{- define "nvl72.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nvl72.operatorName" -}}{{ include "nvl72.fullname" . }}{{- end -}}
{{- define "nvl72.agentName" -}}{{ include "nvl72.fullname" . | trunc 57 | trimSuffix "-" }}-agent{{- end -}}
{{/* Where the agent DaemonSet, its account and its heartbeat Leases live. */}}
{{- define "nvl72.agentNamespace" -}}{{ default .Release.Namespace .Values.agent.namespace }}{{- end -}}
{{- /* The agent DaemonSet's node selection (trayNodeLabel and its values,
gpuNodeLabel, no control-plane role, nodeSelector) as one label selector, for
the operator's --agent-node-selector. */ -}}
{{- define "nvl72.agentNodeSelector" -}}
{{- $a := .Values.agent -}}
{{- $reqs := list -}}
{{- if $a.trayNodeLabelValues -}}
{{- $reqs = append $reqs (printf "%s in (%s)" $a.trayNodeLabel (join "," $a.trayNodeLabelValues)) -}}
{{- else -}}
{{- $reqs = append $reqs $a.trayNodeLabel -}}
{{- end -}}
{{- with $a.gpuNodeLabel -}}
{{- $reqs = append $reqs (printf "%s=true" .) -}}
{{- end -}}
{{- $reqs = append $reqs "!node-role.kubernetes.io/control-plane" -}}
{{- range $k, $v := $a.nodeSelector -}}
{{- $reqs = append $reqs (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- join "," $reqs -}}
{{- end -}}
{{- define "nvl72.leaseName" -}}{{ include "nvl72.fullname" . }}{{- end -}}
{{- define "nvl72.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "nvl72.fullname" . | trunc 51 | trimSuffix "-")) .Values.webhook.secretName -}}
{{- end -}}

{{- /* With cert-manager: its CA injector sets the caBundle of a webhook
configuration from the serving Certificate (webhook-certmanager.yaml). */ -}}
{{- define "nvl72.webhookAnnotations" -}}
{{- if .Values.webhook.certManager.enabled }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "nvl72.operatorName" . }}-webhook
{{- end }}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "nvl72.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "nvl72.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nvl72-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component ("operator" or "agent"). */}}
{{- define "nvl72.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nvl72.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "nvl72.operatorImage" -}}
{{ .Values.image.registry }}/{{ .Values.operator.image.repository }}:{{ default .Chart.AppVersion .Values.operator.image.tag }}
{{- end -}}
{{- define "nvl72.agentImage" -}}
{{ .Values.image.registry }}/{{ .Values.agent.image.repository }}:{{ default .Chart.AppVersion .Values.agent.image.tag }}
{{- end -}}
