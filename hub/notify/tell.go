package notify

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// TellOptions bound what one run sends.
type TellOptions struct {
	// CredentialsDir holds the providers' secrets (<dir>/<name>/address,
	// token) not given in the environment.
	CredentialsDir string
	// MaxPerProvider is how many events one run sends to one provider;
	// the rest wait for the next run. 30 when zero.
	MaxPerProvider int
	// Every spaces the sends to one provider after a burst of five: Slack
	// takes about one message a second per webhook. 1s when zero.
	Every time.Duration
}

// Tell sends each provider the events due to it (ClaimEvents), spaced
// per provider, giving back each that fails for the next run. A provider
// whose credentials are missing is skipped (its events stay due) and
// reported. It returns what was sent.
func Tell(ctx context.Context, rec *Recorder, routes []Route, facts []Fact, o TellOptions) ([]Delivery, error) {
	if o.MaxPerProvider == 0 {
		o.MaxPerProvider = 30
	}
	if o.Every == 0 {
		o.Every = time.Second
	}
	var errs []error
	hooks := map[string]*Webhook{}
	var ready []Route
	for _, rt := range routes {
		c, err := LoadCredentials(rt.Provider, o.CredentialsDir)
		if err == nil {
			hooks[rt.Provider.Metadata.Name], err = NewWebhook(rt.Provider, c)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ready = append(ready, rt)
	}
	due, err := rec.ClaimEvents(ctx, ready, facts, o.MaxPerProvider)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	limits := map[string]*rate.Limiter{}
	var sent, failed []Delivery
	for i, d := range due {
		name := d.Route.Provider.Metadata.Name
		if limits[name] == nil {
			limits[name] = rate.NewLimiter(rate.Every(o.Every), 5)
		}
		if err := limits[name].Wait(ctx); err != nil {
			// Out of time: what was claimed and not sent is due again.
			errs = append(errs, err)
			failed = append(failed, due[i:]...)
			break
		}
		if err := hooks[name].Send(ctx, d.Fact.Event); err != nil {
			errs = append(errs, err)
			failed = append(failed, d)
			continue
		}
		sent = append(sent, d)
	}
	if err := rec.ReleaseEvents(context.WithoutCancel(ctx), failed); err != nil {
		errs = append(errs, err)
	}
	return sent, errors.Join(errs...)
}
