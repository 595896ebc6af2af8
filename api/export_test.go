package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestCheckExportTrailer(t *testing.T) {
	trailer := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		trailer http.Header
		records int
		errText string // "" for a confirmed export
	}{
		{"confirmed", trailer(ExportCompleteTrailer, "true", ExportRecordsTrailer, "2"), 2, ""},
		{"confirmed empty", trailer(ExportCompleteTrailer, "true", ExportRecordsTrailer, "0"), 0, ""},
		{"no trailer", nil, 2, "did not confirm the end of the stream (no Verdict-Export-Complete trailer after 2 records)"},
		{"count without completion", trailer(ExportRecordsTrailer, "2"), 2, "did not confirm the end"},
		{"not true", trailer(ExportCompleteTrailer, "TRUE ", ExportRecordsTrailer, "2"), 2, "did not confirm the end"},
		{"records missing", trailer(ExportCompleteTrailer, "true", ExportRecordsTrailer, "3"), 2, "the daemon wrote 3 records, 2 arrived"},
		{"more records than written", trailer(ExportCompleteTrailer, "true", ExportRecordsTrailer, "1"), 2, "the daemon wrote 1 records, 2 arrived"},
		{"no count", trailer(ExportCompleteTrailer, "true"), 2, `bad Verdict-Export-Records trailer ""`},
		{"negative count", trailer(ExportCompleteTrailer, "true", ExportRecordsTrailer, "-1"), 2, "bad Verdict-Export-Records"},
	} {
		err := CheckExportTrailer(tc.trailer, tc.records)
		switch {
		case tc.errText == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.errText != "" && (!errors.Is(err, ErrExportIncomplete) || !strings.Contains(err.Error(), tc.errText)):
			t.Errorf("%s: err = %v, want ErrExportIncomplete mentioning %q", tc.name, err, tc.errText)
		}
	}
}
