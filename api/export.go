package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// An HTTP JSONL export (GET /v1/records of verdictd, GET /v1/executions of the executor) proves
// that it ended where the server meant it to end with two trailers, sent after the last record
// and only when every record was written. Without them a stream cut at a line boundary (the
// server crashing or giving up midway, a proxy's timeout, a connection reset after a complete
// line) reads exactly like a whole, shorter export. The body stays one record a line; clients
// that ignore trailers read it as before.
const (
	// ExportCompleteTrailer is "true" when the export wrote every record it selected.
	ExportCompleteTrailer = "Verdict-Export-Complete"
	// ExportRecordsTrailer is the number of records (non-blank lines) the export wrote.
	ExportRecordsTrailer = "Verdict-Export-Records"
)

// ErrExportIncomplete: an HTTP export's response did not confirm that it carried the whole
// export.
var ErrExportIncomplete = errors.New("export incomplete")

// CheckExportTrailer checks the trailer of an HTTP export response read to its end (net/http
// fills http.Response.Trailer only once the body returned io.EOF) against the number of
// records the client read. Missing or disagreeing trailers are an error wrapping
// ErrExportIncomplete: the export cannot be told apart from part of one.
func CheckExportTrailer(trailer http.Header, records int) error {
	if trailer.Get(ExportCompleteTrailer) != "true" {
		return fmt.Errorf("%w: the daemon did not confirm the end of the stream (no %s trailer after %d records), "+
			"so the records read may be only part of the export: it failed midway or the connection was cut, "+
			"or a proxy on the way dropped the HTTP trailers",
			ErrExportIncomplete, ExportCompleteTrailer, records)
	}
	v := trailer.Get(ExportRecordsTrailer)
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0:
		return fmt.Errorf("%w: bad %s trailer %q", ErrExportIncomplete, ExportRecordsTrailer, v)
	case n != records:
		return fmt.Errorf("%w: the daemon wrote %d records, %d arrived", ErrExportIncomplete, n, records)
	}
	return nil
}
