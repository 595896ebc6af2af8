package upstream

import "bytes"

// eventData gathers the data of one server-sent event, line by line. Both readers of an event
// stream take their lines through it, the pass-through's (readEvents) and the capture of what
// the SDK reads (captureBody), so the two cut a stream into the same events, and into those the
// SDK's client reads: a line ends at "\n" and every "\r" and "\n" at its end is dropped; an
// empty line ends an event; an event's "data" lines are joined with "\n", each without the one
// space after its colon ("data" alone is an empty data line); other fields are skipped.
type eventData struct {
	buf []byte
	has bool // a data line was read, perhaps an empty one
}

// line takes one line of the stream, with or without its ending. When the line is empty, it
// returns the data of the event the line ends, and whether the event had any.
func (e *eventData) line(line []byte) ([]byte, bool) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return e.end()
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	if string(field) != "data" {
		return nil, false
	}
	if e.has {
		e.buf = append(e.buf, '\n')
	}
	e.buf, e.has = append(e.buf, bytes.TrimPrefix(value, []byte(" "))...), true
	return nil, false
}

// end ends the event being read, as at the end of the stream, where an event is taken though
// no empty line ended it: its data, and whether it had any. The data is the caller's to keep.
func (e *eventData) end() ([]byte, bool) {
	data := e.buf
	e.buf, e.has = nil, false
	return data, len(data) > 0
}
