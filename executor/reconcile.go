package executor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/nonce"
	"github.com/verdictgate/verdict/store"
)

// How a consumed verdict that never started was found, the found label of
// executor_consumed_without_start_total.
const (
	foundAtRestart  = "restart"    // consumed by an earlier run of this executor
	foundUnanswered = "unanswered" // consumed by this run, by an attempt it gave up on
)

// reconcileRetry is how long the reconciler waits before asking an unavailable nonce store
// again. It only paces the retries: what is settled is decided by the store's data.
const reconcileRetry = time.Second

// reconcile keeps the shared nonce store and this executor's records in agreement until ctx
// ends: first every verdict an earlier run consumed (within the store's horizon, its keys'
// leases), then, for as long as the process lives, every consume this run gave up on.
func (s *Service) reconcile(ctx context.Context, r nonce.Reconciler) {
	t := time.NewTicker(reconcileRetry)
	defer t.Stop()
	for {
		if !s.reconciled.Load() {
			if err := s.reconcileEarlierRuns(ctx, r); err != nil && ctx.Err() == nil {
				s.log.Warn("reconcile the consumes of earlier runs; retrying", "error", err)
			}
		}
		if r.Pending() > 0 {
			if left, err := s.settleUnanswered(ctx, r); err != nil && ctx.Err() == nil {
				s.log.Warn("settle the consumes given up on; retrying", "pending", left, "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.unsettled:
		case <-t.C:
		}
	}
}

// reconcileEarlierRuns accounts for every verdict an earlier run of this executor consumed.
// No request of this process can be about to start one of them: the store fences an earlier
// run's consumes out before it lists them, and this run's consumes are not listed.
func (s *Service) reconcileEarlierRuns(ctx context.Context, r nonce.Reconciler) error {
	n := 0
	err := r.EarlierRuns(ctx, func(o nonce.Orphan) error {
		wrote, err := s.accountFor(ctx, r, o, foundAtRestart)
		if wrote {
			n++
		}
		return err
	})
	if err != nil {
		return err
	}
	s.reconciled.Store(true)
	s.log.Info("nonce store reconciled with the execution records", "consumed_without_start", n)
	return nil
}

// settleUnanswered accounts for the consumes this run gave up on, and returns how many are
// still pending. The store hands over only a key that the given-up attempt itself created: a
// key another request of this process created belongs to that request, which got its answer
// and writes its own record.
func (s *Service) settleUnanswered(ctx context.Context, r nonce.Reconciler) (int, error) {
	return r.Settle(ctx, func(o nonce.Orphan) error {
		_, err := s.accountFor(ctx, r, o, foundUnanswered)
		return err
	})
}

// accountFor makes sure a verdict this executor consumed is on record, and that the store
// answers it as never started when it did not start. A record that is not a refusal (started,
// or finished from started), or one finished from started as not_executed because its request
// never reached the server (upstream_unavailable), means the call was started: that record says
// what happened, and the verdict stays a replay. Otherwise nothing ran, since the tool is called only after the
// started record's commit, and the store hands over only consumes no live request will
// start: the executor writes a consumed_without_start record (once), and then marks the key,
// so that a crash between the two leaves the record and the mark is made at the next pass.
// wrote reports whether a record was written.
func (s *Service) accountFor(ctx context.Context, r nonce.Reconciler, o nonce.Orphan, found string) (wrote bool, err error) {
	xs, err := s.execs.ByVerdict(ctx, o.JTI)
	if err != nil {
		return false, fmt.Errorf("read the records of verdict %s: %w", o.JTI, err)
	}
	var recorded bool
	var refused *api.ExecutionRecord // the latest refusal that carries the verdict's claims
	for _, x := range xs {
		switch {
		case x.Decision != api.ExecutionNotExecuted, x.Reason == api.ExecutionReasonUpstreamUnavailable:
			return false, nil
		case x.Reason == store.ReasonConsumedWithoutStart:
			recorded = true
		case x.Server != "":
			refused = x
		}
	}
	if !recorded {
		now := s.now()
		rec := &api.ExecutionRecord{
			ExecutorID: s.cfg.ExecutorID,
			VerdictID:  o.JTI,
			Reason:     store.ReasonConsumedWithoutStart,
			StartedAt:  o.ConsumedAt,
			FinishedAt: now,
		}
		if rec.StartedAt.IsZero() || rec.StartedAt.After(now) {
			rec.StartedAt = now
		}
		// The refusal of the request whose consume was given up on carries the verified
		// claims; a crash left none, and the record names the verdict id alone.
		if refused != nil {
			rec.ActionKey, rec.RefPhase, rec.RefRecord = refused.ActionKey, refused.RefPhase, refused.RefRecord
			rec.Principal, rec.Server, rec.Tool = refused.Principal, refused.Server, refused.Tool
			rec.ArgumentsDigest, rec.Verdict = refused.ArgumentsDigest, refused.Verdict
		}
		if err := s.execs.RecordRefusal(ctx, rec); err != nil {
			return false, fmt.Errorf("record verdict %s as consumed without start: %w", o.JTI, err)
		}
		wrote = true
		s.metrics.consumedWithoutStart(found)
		s.log.LogAttrs(ctx, slog.LevelWarn, "verdict consumed and never started", slog.String("record_id", rec.RecordID),
			slog.String("verdict_id", o.JTI), slog.String("found", found))
	}
	if err := r.MarkNotStarted(ctx, o); err != nil {
		return wrote, fmt.Errorf("mark verdict %s as never started: %w", o.JTI, err)
	}
	return wrote, nil
}
