package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/verdictgate/verdict/api"
)

// FuzzReadExport: whatever a daemon, or whatever stands between it and the client, sends, an
// export counts as whole only when its trailers confirm exactly the records handed over, each
// of which is JSON.
func FuzzReadExport(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"a\":2}\n"), "true", "2")
	f.Add([]byte("{\"a\":1}\n\n"), "true", "1")
	f.Add([]byte("{\"a\":1}\n{\"a\":"), "true", "2")
	f.Add([]byte(""), "true", "0")
	f.Add([]byte("{}\n"), "", "1")
	f.Add([]byte("{}\n{}"), "true", "+2")
	f.Fuzz(func(t *testing.T, body []byte, complete, count string) {
		trailer := http.Header{}
		trailer.Set(api.ExportCompleteTrailer, complete)
		trailer.Set(api.ExportRecordsTrailer, count)
		var handed [][]byte
		n, err := readExport(bytes.NewReader(body), func() http.Header { return trailer }, func(line json.RawMessage) error {
			handed = append(handed, line)
			return nil
		})
		if n != len(handed) {
			t.Fatalf("n = %d, %d handed", n, len(handed))
		}
		for _, l := range handed {
			if !json.Valid(l) {
				t.Fatalf("handed a line that is not JSON: %q", l)
			}
		}
		if err != nil {
			return
		}
		if complete != "true" {
			t.Fatalf("complete without %s: true (%q)", api.ExportCompleteTrailer, complete)
		}
		if c, cerr := strconv.Atoi(count); cerr != nil || c != n {
			t.Fatalf("complete with %d records and a count of %q", n, count)
		}
	})
}

// TestReadExportStopsOnCallbackError: an error from the callback ends the read with that
// error, never mistaken for an incomplete export.
func TestReadExportStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n, err := readExport(bytes.NewReader([]byte("{}\n{}\n")), func() http.Header { return nil }, func(json.RawMessage) error { return stop })
	if n != 1 || !errors.Is(err, stop) || errors.Is(err, api.ErrExportIncomplete) {
		t.Fatalf("n = %d, err = %v", n, err)
	}
}
