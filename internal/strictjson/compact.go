package strictjson

import (
	"bytes"
	"encoding/json"
)

// AppendCompact appends src to dst without insignificant whitespace, as json.Compact does, and
// fails as json.Compact fails on anything that is not one JSON value. JSON that is already
// compact (what json.Marshal writes) is checked in one fast pass and appended as it is;
// anything else goes through json.Compact.
func AppendCompact(dst, src []byte) ([]byte, error) {
	sc := scanner{data: src}
	if err := sc.skip(); err == nil && sc.pos == len(src) && !sc.space {
		return append(dst, src...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}
