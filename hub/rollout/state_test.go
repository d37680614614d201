package rollout

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestStateRoundTrip(t *testing.T) {
	in := &State{APIVersion: APIVersion, Kind: Kind, Application: "web", Revision: "sha256:ab", Released: 1, Waves: 3, Reason: "new revision"}
	data, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", data, err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	if out.Complete() {
		t.Error("1 of 3 waves is not complete")
	}
	if Path("web") != "rendered/rollouts/web.yaml" {
		t.Errorf("path %s", Path("web"))
	}
}

func TestParseRejects(t *testing.T) {
	const head = "apiVersion: flotilla.dev/v1alpha1\nkind: RolloutState\n"
	for name, tc := range map[string]struct{ doc, detail string }{
		"unknown field":    {head + "application: web\nrevision: sha256:a\nreleased: 1\nwaves: 2\nrelased: 2\n", "relased"},
		"wrong kind":       {"apiVersion: flotilla.dev/v1alpha1\nkind: Slice\napplication: web\nrevision: sha256:a\n", "kind"},
		"bad application":  {head + "application: Web_1\nrevision: sha256:a\n", "Web_1"},
		"bad revision":     {head + "application: web\nrevision: abc\n", "abc"},
		"negative release": {head + "application: web\nrevision: sha256:a\nreleased: -1\n", "negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if !errors.Is(err, ErrInvalidState) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("want ErrInvalidState naming %q, got %v", tc.detail, err)
			}
		})
	}
}
