package verdictd

import (
	"errors"
	"io"
	"net/http"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/internal/httpx"
	"github.com/verdictgate/verdict/store"
)

func (s *Service) handleGetRecord(w http.ResponseWriter, r *http.Request) {
	d, err := s.decisions.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		httpx.WriteError(w, httpx.Errorf(http.StatusNotFound, api.CodeNotFound, "no decision record with that id"))
		return
	}
	if err != nil {
		s.log.Error("read decision record", "error", err.Error())
		httpx.WriteError(w, err)
		return
	}
	out := []byte(d.Record)
	if m := store.QueryMask(r.URL.Query()); m != nil {
		if out, err = m.Mask(out); err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(out)
}

// handleListRecords streams decision records as JSONL: ?action_key=K (that key's records),
// ?verdict_id=J (the record that issued J), or ?since=RFC3339 (default: all); ?mask=1 masks
// values. A complete export ends with the api.ExportCompleteTrailer and
// api.ExportRecordsTrailer trailers; one that fails after its first bytes is aborted, so that
// no client takes it for a whole, shorter export.
func (s *Service) handleListRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mask := store.QueryMask(q)
	since, err := store.QuerySince(q)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	store.ServeJSONL(w, s.log, "record export ended early", func(out io.Writer) (int, error) {
		n := 0
		write := func(d *store.Decision) error {
			line := []byte(d.Record)
			if mask != nil {
				var err error
				if line, err = mask.Mask(line); err != nil {
					return err
				}
			}
			if _, err := out.Write(append(line, '\n')); err != nil {
				return err
			}
			n++
			return nil
		}
		switch {
		case q.Has("verdict_id"):
			d, err := s.decisions.ByVerdict(r.Context(), q.Get("verdict_id"))
			if errors.Is(err, store.ErrNotFound) {
				return 0, nil
			}
			if err == nil {
				err = write(d)
			}
			return n, err
		case q.Has("action_key"):
			err := s.decisions.ByActionKey(r.Context(), q.Get("action_key"), func(d *store.Decision) error {
				if d.Time.Before(since) {
					return nil
				}
				return write(d)
			})
			return n, err
		default:
			return s.decisions.ExportJSONLCount(r.Context(), out, since, mask)
		}
	})
}
