package ship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdictgate/verdict/internal/buildinfo"
	"github.com/verdictgate/verdict/store"
)

// Options are the parts of a Shipper that are not configuration.
type Options struct {
	Logger *slog.Logger
	// Client posts to HTTP sinks; nil means http.DefaultClient's transport with no timeout
	// of its own (each sink's timeout bounds a delivery).
	Client *http.Client
	// Labels name the daemon in OPA-format events.
	Labels Labels
	// Registerer gets the shipping metrics, named <Namespace>_ship_….
	Registerer prometheus.Registerer
	Namespace  string
}

// Shipper ships one daemon's records to its sinks.
type Shipper struct {
	cfg    Config
	outbox *store.Outbox
	log    *slog.Logger
	sinks  []sinkRun
	names  []string
	wake   chan struct{}

	lag                   *prometheus.GaugeVec
	sent, failed, dropped *prometheus.CounterVec
}

type sinkRun struct {
	name string
	sink Sink
	mask store.Masker // nil: unmasked
}

// New returns a shipper reading outbox, which must belong to a DB opened with
// store.Options.Outbox. It reads token files now, so a missing one fails the daemon's start.
func New(cfg Config, outbox *store.Outbox, opts Options) (*Shipper, error) {
	if errs := cfg.Validate("shipping"); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Shipper{cfg: cfg, outbox: outbox, log: opts.Logger, wake: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	for _, c := range cfg.Sinks {
		r := sinkRun{name: c.Name}
		if !c.Unmasked {
			r.mask = store.DefaultMask()
		}
		switch {
		case c.HTTP != nil:
			h, err := newHTTPSink(c.HTTP, client, opts.Labels)
			if err != nil {
				return nil, fmt.Errorf("shipping sink %s: %w", c.Name, err)
			}
			r.sink = h
		default:
			r.sink = newFileSink(c.File)
		}
		s.sinks = append(s.sinks, r)
		s.names = append(s.names, c.Name)
	}
	ns := opts.Namespace
	s.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "ship_lag_records",
		Help: "Records committed and not yet shipped to the sink."}, []string{"sink"})
	s.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "ship_sent_records_total",
		Help: "Records a sink acknowledged (a record sent again after a crash counts again)."}, []string{"sink"})
	s.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "ship_failures_total",
		Help: "Deliveries a sink refused or that did not reach it."}, []string{"sink"})
	s.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "ship_dropped_records_total",
		Help: "Records never shipped to a sink because it lagged more than max_lag behind."}, []string{"sink"})
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.lag, s.sent, s.failed, s.dropped} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("shipping metrics: %w", err)
			}
		}
	}
	for _, r := range s.sinks {
		s.lag.WithLabelValues(r.name)
		s.sent.WithLabelValues(r.name)
		s.failed.WithLabelValues(r.name)
		s.dropped.WithLabelValues(r.name)
	}
	return s, nil
}

// Notify says records were committed: the sinks read the outbox at once instead of at their
// next interval. It never blocks.
func (s *Shipper) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run ships until ctx ends. Each sink runs on its own.
func (s *Shipper) Run(ctx context.Context) {
	wakes := make([]chan struct{}, len(s.sinks))
	done := make(chan struct{})
	for i := range s.sinks {
		wakes[i] = make(chan struct{}, 1)
		go func() {
			defer func() { done <- struct{}{} }()
			s.run(ctx, s.sinks[i], wakes[i])
		}()
	}
	// Fan the one wake channel out to every sink.
	for n := 0; n < len(s.sinks); {
		select {
		case <-s.wake:
			for _, w := range wakes {
				select {
				case w <- struct{}{}:
				default:
				}
			}
		case <-done:
			n++
		}
	}
}

// run ships to one sink: read after the cursor, send, advance; wait when there is nothing to
// send, back off while the sink fails.
func (s *Shipper) run(ctx context.Context, r sinkRun, wake <-chan struct{}) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, err := s.step(ctx, r)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.failed.WithLabelValues(r.name).Inc()
			backoff = min(max(2*backoff, s.cfg.interval()), MaxBackoff)
			s.log.Warn("shipping: delivery failed; will retry", "sink", r.name, "retry_in", backoff.String(), "error", err.Error())
			wait(ctx, backoff, nil)
		case n == 0:
			backoff = 0
			wait(ctx, s.cfg.interval(), wake)
		default:
			backoff = 0
		}
	}
}

func wait(ctx context.Context, d time.Duration, wake <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// step ships one batch to r and returns how many records it shipped.
func (s *Shipper) step(ctx context.Context, r sinkRun) (int, error) {
	cur, err := s.outbox.Cursor(ctx, r.name)
	if err != nil {
		return 0, err
	}
	last, err := s.outbox.Last(ctx)
	if err != nil {
		return 0, err
	}
	if lag := last - min(cur, last); lag > s.cfg.maxLag() {
		drop := lag - s.cfg.maxLag()
		if err := s.outbox.Advance(ctx, r.name, cur+drop, s.names); err != nil {
			return 0, err
		}
		s.dropped.WithLabelValues(r.name).Add(float64(drop))
		s.log.Error("shipping: sink lagged past max_lag; oldest records dropped for it", "sink", r.name, "dropped", drop)
		cur += drop
	}
	s.lag.WithLabelValues(r.name).Set(float64(last - min(cur, last)))
	entries, err := s.outbox.Read(ctx, cur, s.cfg.batchSize())
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	batch := make([]Record, 0, len(entries))
	for _, e := range entries {
		if e.Record == nil {
			continue // no longer stored: nothing to ship
		}
		rec := Record{Seq: e.Seq, Kind: kindName(e.Kind), RecordID: e.RecordID, JSON: e.Record}
		if r.mask != nil {
			if rec.JSON, err = r.mask.Mask(e.Record); err != nil {
				return 0, fmt.Errorf("mask %s: %w", e.RecordID, err)
			}
		}
		batch = append(batch, rec)
	}
	if len(batch) > 0 {
		if err := r.sink.Send(ctx, batch); err != nil {
			return 0, err
		}
	}
	end := entries[len(entries)-1].Seq
	if err := s.outbox.Advance(ctx, r.name, end, s.names); err != nil {
		return 0, err
	}
	s.sent.WithLabelValues(r.name).Add(float64(len(batch)))
	s.lag.WithLabelValues(r.name).Set(float64(last - min(end, last)))
	return len(entries), nil
}

// ForDaemon is how a daemon starts shipping: nil without cfg; else a Shipper over db's outbox
// whose events are labelled with the daemon's name, db's instance id and the build's version,
// and whose metrics are registered in reg as <app>_ship_….
func ForDaemon(ctx context.Context, cfg *Config, db *store.DB, app string, reg prometheus.Registerer, log *slog.Logger) (*Shipper, error) {
	if cfg == nil {
		return nil, nil
	}
	id, err := db.FileID(ctx)
	if err != nil {
		return nil, err
	}
	return New(*cfg, db.Outbox(), Options{Logger: log, Registerer: reg, Namespace: app,
		Labels: Labels{App: app, ID: id, Version: buildinfo.Read().Version}})
}
