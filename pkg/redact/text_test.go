package redact

import (
	"encoding/base64"
	"strings"
	"testing"
)

const marker = "s3cr3t-MARKER-value"

func TestTextRemovesSecretData(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(marker))
	tests := []struct {
		name string
		msg  string
		gone []string // must not survive
		kept []string // must survive
	}{
		{
			name: "json data map",
			msg:  `apply failed: {"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":"` + b64 + `","user":"YWRtaW4="},"type":"Opaque"}`,
			gone: []string{b64, "YWRtaW4="},
			kept: []string{`"metadata":{"name":"db"}`, `"type":"Opaque"`, "apply failed"},
		},
		{
			name: "json stringData",
			msg:  `{"kind":"Secret","stringData":{"password":"` + marker + `"}}`,
			gone: []string{marker},
			kept: []string{`"kind":"Secret"`},
		},
		{
			name: "yaml block",
			msg:  "error in manifest:\napiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: " + b64 + "\n  short: eA==\ntype: Opaque\n",
			gone: []string{b64, "eA=="},
			kept: []string{"metadata:\n  name: db", "type: Opaque"},
		},
		{
			name: "yaml stringData with a short value",
			msg:  "kind: Secret\nstringData:\n  token: abc\n  other: x\nmetadata:\n  name: s\n",
			gone: []string{"token: abc", "other: x"},
			kept: []string{"name: s"},
		},
		{
			name: "quoted yaml inside a message",
			msg:  `render: "kind: Secret\ndata:\n  key: c2hvcnQ=\nmetadata:\n  name: x\n"`,
			gone: []string{"c2hvcnQ="},
			kept: []string{`name: x`},
		},
		{
			name: "go map",
			msg:  "object map[data:map[password:" + marker + "] kind:Secret]",
			gone: []string{marker},
			kept: []string{"kind:Secret"},
		},
		{
			name: "api server invalid value",
			msg:  `Secret "db" is invalid: data[pass word]: Invalid value: "` + marker + `": a valid config key must consist of alphanumeric characters`,
			gone: []string{marker},
			kept: []string{`Secret "db" is invalid: data[pass word]:`},
		},
		{
			name: "api server type error",
			msg:  `failed to create typed patch object (app/x; /v1, Kind=Secret): .data.token: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"nested":"` + marker + `"}}; next clause`,
			gone: []string{marker},
			kept: []string{"failed to create typed patch object (app/x; /v1, Kind=Secret): .data.token:", "; next clause"},
		},
		{
			name: "pem block",
			msg:  "tls: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + marker + "\n-----END RSA PRIVATE KEY----- bad",
			gone: []string{marker, "MIIEpAIBAAKCAQEA"},
			kept: []string{"BEGIN RSA PRIVATE KEY", "bad"},
		},
		{
			name: "url credentials",
			msg:  "fetch https://bot:" + marker + "@git.example.com/fleet.git: 401",
			gone: []string{marker},
			kept: []string{"https://bot:", "@git.example.com/fleet.git: 401"},
		},
		{
			name: "credential pairs",
			msg:  `values: password=` + marker + ` token: "abc def" apiKey: xyz`,
			gone: []string{marker, "abc def", "xyz"},
			kept: []string{"password=", "values:"},
		},
		{
			name: "bare base64 blob",
			msg:  "unexpected value " + base64.StdEncoding.EncodeToString([]byte("hunter2 is my password!")) + " in field",
			gone: []string{base64.StdEncoding.EncodeToString([]byte("hunter2 is my password!"))},
			kept: []string{"unexpected value", "in field"},
		},
		{
			name: "unpadded random-looking blob",
			msg:  "got kQ3xT9vLm2Pz8RwYb7Nc4Hd",
			gone: []string{"kQ3xT9vLm2Pz8RwYb7Nc4Hd"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Text(tt.msg)
			for _, g := range tt.gone {
				if strings.Contains(got, g) {
					t.Errorf("%q survived:\n%s", g, got)
				}
			}
			for _, k := range tt.kept {
				if !strings.Contains(got, k) {
					t.Errorf("%q was removed:\n%s", k, got)
				}
			}
			if !strings.Contains(got, Mask) {
				t.Errorf("nothing marked redacted:\n%s", got)
			}
		})
	}
}

func TestTextKeepsOrdinaryMessages(t *testing.T) {
	for _, msg := range []string{
		"Applied revision: main@sha1:0123456789abcdef0123456789abcdef01234567",
		`Deployment/default/web dry-run: apply failed: Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`,
		"units backend, frontend-web not ready",
		"HorizontalPodAutoscaler/ns1/app-v2 not ready",
		"StatefulSet/kube-system/etcd-0 health check timed out",
		"image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 not found",
		"failed to read data: EOF",
		"ReconciliationSucceeded",
		"kustomize: accumulating resources from 'rendered/d1/member2/backend': evalsymlink failure",
		"flotilla-inventory-backend-api-server-v1 is corrupt",
		"2 of 5 units failing at main@sha1:0123456789ab",
	} {
		if got := Text(msg); got != msg {
			t.Errorf("Redact changed an ordinary message:\n in: %s\nout: %s", msg, got)
		}
	}
}

func FuzzText(f *testing.F) {
	f.Add(`{"data":{"a":"b"}}`)
	f.Add("data:\n  a: b\nx")
	f.Add("map[data:map[a:b")
	f.Add("-----BEGIN X-----")
	f.Fuzz(func(t *testing.T, msg string) {
		out := Text(msg)
		// Idempotent: redacting again changes nothing.
		if again := Text(out); again != out {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
	})
}
