package fleet

import (
	"net/url"
	"slices"
	"strings"
	"time"
)

var providerTypes = []string{ProviderGeneric, ProviderGenericHMAC, ProviderSlack, ProviderMSTeams}

func (v *validator) provider(p *Provider) {
	d := v.docs[p]
	v.meta(d, p.Metadata)
	s := p.Spec
	switch {
	case s.Type == "":
		d.errorf("spec.type", ErrRequired, "one of %s", strings.Join(providerTypes, ", "))
	case !slices.Contains(providerTypes, s.Type):
		d.errorf("spec.type", ErrInvalidValue, "%q is not one of %s", s.Type, strings.Join(providerTypes, ", "))
	}
	if s.Address != "" {
		u, err := url.Parse(s.Address)
		switch {
		case err != nil:
			d.errorf("spec.address", ErrInvalidValue, "not a URL: %v", err)
		case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
			d.errorf("spec.address", ErrInvalidValue, "%q is not an http(s) URL", u.Redacted())
		case u.User != nil:
			d.errorf("spec.address", ErrInvalidValue, "holds credentials: give them in spec.secretRef, not in the fleet repo")
		}
	}
	if s.Address == "" && s.SecretRef == nil {
		d.errorf("spec.address", ErrRequired, "the webhook's URL, here or as the address of spec.secretRef")
	}
	if s.SecretRef != nil {
		dnsLabel(d, "spec.secretRef.name", s.SecretRef.Name)
	} else if s.Type == ProviderGenericHMAC {
		d.errorf("spec.secretRef", ErrRequired, "generic-hmac signs with the secret's token")
	}
	if (s.Channel != "" || s.Username != "") && s.Type != ProviderSlack {
		field := "spec.channel"
		if s.Channel == "" {
			field = "spec.username"
		}
		d.errorf(field, ErrInvalidValue, "only a slack provider has one")
	}
	if s.Timeout != nil && (s.Timeout.Duration <= 0 || s.Timeout.Duration > 5*time.Minute) {
		d.errorf("spec.timeout", ErrInvalidValue, "%s: want more than 0 and at most 5m", s.Timeout.Duration)
	}
}

var eventSourceKinds = []string{KindFleet, KindApplication, KindCluster}

func (v *validator) alert(a *Alert) {
	d := v.docs[a]
	v.meta(d, a.Metadata)
	s := a.Spec
	switch ref := s.ProviderRef.Name; {
	case ref == "":
		d.errorf("spec.providerRef.name", ErrRequired, "the Provider the events go to")
	case !slices.ContainsFunc(v.r.Providers, func(p *Provider) bool { return p.Metadata.Name == ref }) && !v.broken[KindProvider][ref]:
		d.errorf("spec.providerRef.name", ErrDanglingReference, "no Provider %q in %s/", ref, ProvidersDir)
	}
	if sev := s.EventSeverity; sev != "" && sev != SeverityInfo && sev != SeverityError {
		d.errorf("spec.eventSeverity", ErrInvalidValue, "%q is not info or error", sev)
	}
	for i, src := range s.EventSources {
		f := indexPath("spec.eventSources", i)
		if !slices.Contains(eventSourceKinds, src.Kind) {
			d.errorf(f+".kind", ErrInvalidValue, "%q is not one of %s", src.Kind, strings.Join(eventSourceKinds, ", "))
			continue
		}
		if src.Name == "*" {
			continue
		}
		if src.Name == "" {
			d.errorf(f+".name", ErrRequired, "a %s's name, or * for every one", src.Kind)
			continue
		}
		if v.missing(src.Kind, src.Name) {
			d.errorf(f+".name", ErrDanglingReference, "no %s %q", src.Kind, src.Name)
		}
	}
	for i, r := range s.EventReasons {
		if !slices.Contains(EventReasons, r) {
			d.errorf(indexPath("spec.eventReasons", i), ErrInvalidValue, "%q is not one of %s", r, strings.Join(EventReasons, ", "))
		}
	}
}
