package gates

import (
	"errors"

	"github.com/verdictgate/verdict/internal/strictjson"
)

// errNotRead refuses a value the hand-written request reader does not decode itself, such as a
// member that is not one of the type's exact names or a candidate without a value.
var errNotRead = errors.New("gates: request not read by the fast decoder")

// smallCap is the capacity a request's arrays start with: requests hold a few segments,
// candidates and answers, which then take one allocation instead of three.
const smallCap = 4

// decodeRequestFast decodes data into r in one pass, as strictUnmarshal decodes a Request with
// its custom UnmarshalJSON methods, without encoding/json's reflection and without re-scanning
// the nested objects those methods decode again.
//
// It reports false on anything it does not decode exactly as strictUnmarshal would: a member
// name that is not exactly a field's, a value of an unexpected type, a refused candidate, a
// string it does not unescape. Then r is garbage and the caller decodes with strictUnmarshal,
// whose answer (and error message) stands. So the fast path only ever accepts, never refuses.
//
// data must have passed canonical validation: it relies on there being no duplicate members,
// which encoding/json would merge into values decoded earlier.
func decodeRequestFast(data []byte, r *Request) bool {
	rd := strictjson.NewReader(data)
	readRequest(&rd, r)
	rd.End()
	return rd.Err() == nil
}

func readRequest(rd *strictjson.Reader, r *Request) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "principal":
			readString(rd, &r.Principal)
		case "conversation_id":
			readString(rd, &r.ConversationID)
		case "new_request":
			if !rd.Null() {
				r.NewRequest = rd.Bool()
			}
		case "server":
			readString(rd, &r.Server)
		case "tool":
			readString(rd, &r.Tool)
		case "phase":
			r.Phase = readStringPtr(rd)
		case "action_key":
			r.ActionKey = readStringPtr(rd)
		case "instruction":
			readInstruction(rd, &r.Instruction)
		case "intent":
			r.Intent = nil
			if !rd.Null() {
				r.Intent = new(Intent)
				readIntent(rd, r.Intent)
			}
		case "candidates":
			r.Candidates = nil
			if !rd.Null() {
				rd.Array()
				r.Candidates = make([]Candidate, 0, smallCap)
				for rd.More() {
					r.Candidates = append(r.Candidates, Candidate{})
					readCandidate(rd, &r.Candidates[len(r.Candidates)-1])
				}
			}
		case "user_answers":
			r.UserAnswers = nil
			if !rd.Null() {
				rd.Array()
				r.UserAnswers = make([]Answer, 0, smallCap)
				for rd.More() {
					r.UserAnswers = append(r.UserAnswers, Answer{})
					if !rd.Null() {
						readAnswer(rd, &r.UserAnswers[len(r.UserAnswers)-1])
					}
				}
			}
		case "pre_set_data":
			r.PreSetData = nil
			if !rd.Null() {
				rd.Object()
				r.PreSetData = map[string]PreSet{}
				for {
					key, ok := rd.Member()
					if !ok {
						break
					}
					k := string(key)
					var p PreSet
					if !rd.Null() {
						readPreSet(rd, &p)
					}
					r.PreSetData[k] = p
				}
			}
		case "user_checklist":
			r.UserChecklist = nil
			if !rd.Null() {
				rd.Array()
				r.UserChecklist = make([]RequestCheckItem, 0, smallCap)
				for rd.More() {
					r.UserChecklist = append(r.UserChecklist, RequestCheckItem{})
					if !rd.Null() {
						readCheckItem(rd, &r.UserChecklist[len(r.UserChecklist)-1])
					}
				}
			}
		case "tool_attempt":
			if !rd.Null() {
				r.ToolAttempt = rd.Int()
			}
		case "intent_attempt":
			if !rd.Null() {
				r.IntentAttempt = rd.Int()
			}
		default:
			rd.Fail(errNotRead)
		}
	}
}

// readString reads a string into s; null leaves s as it is, as encoding/json does.
func readString(rd *strictjson.Reader, s *string) {
	if !rd.Null() {
		*s = rd.Str()
	}
}

func readStringPtr(rd *strictjson.Reader) *string {
	if rd.Null() {
		return nil
	}
	s := rd.Str()
	return &s
}

func readIntPtr(rd *strictjson.Reader) *int {
	if rd.Null() {
		return nil
	}
	n := rd.Int()
	return &n
}

// readInstruction is Instruction.UnmarshalJSON.
func readInstruction(rd *strictjson.Reader, in *Instruction) {
	switch rd.Peek() {
	case '"':
		*in = Instruction{Plain: true, Text: rd.Str()}
	case 'n':
		rd.Null()
		*in = Instruction{}
	default:
		rd.Array()
		segs := make([]Segment, 0, smallCap)
		for rd.More() {
			segs = append(segs, Segment{})
			if !rd.Null() {
				readSegment(rd, &segs[len(segs)-1])
			}
		}
		*in = Instruction{Segments: segs}
	}
}

func readSegment(rd *strictjson.Reader, s *Segment) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "text":
			readString(rd, &s.Text)
		case "trust":
			readString(rd, &s.Trust)
		case "origin":
			readString(rd, &s.Origin)
		default:
			rd.Fail(errNotRead)
		}
	}
}

// readSpan is Span.UnmarshalJSON: exactly two integers. A null element, which encoding/json
// would read as 0, is left to the reflective decoder.
func readSpan(rd *strictjson.Reader, s *Span) {
	rd.Array()
	i := 0
	for rd.More() {
		if i == len(s) {
			rd.Fail(errNotRead)
			return
		}
		s[i] = rd.Int()
		i++
	}
	if i != len(s) {
		rd.Fail(errNotRead)
	}
}

func readSpanPtr(rd *strictjson.Reader) *Span {
	if rd.Null() {
		return nil
	}
	s := new(Span)
	readSpan(rd, s)
	return s
}

// readValue is Value.UnmarshalJSON: null too is a value that is present.
func readValue(rd *strictjson.Reader, v *Value) {
	*v = Value{Set: true, V: rd.Any()}
}

func readIntent(rd *strictjson.Reader, it *Intent) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "when_case":
			// encoding/json hands a json.RawMessage a copy of the value's text, null included.
			it.WhenCase = append([]byte(nil), rd.Raw()...)
		case "action_name":
			it.ActionName = nil
			if !rd.Null() {
				it.ActionName = new(Location)
				readLocation(rd, it.ActionName)
			}
		case "action_name_preset":
			it.ActionNamePreset = nil
			if !rd.Null() {
				it.ActionNamePreset = new(PreSet)
				readPreSet(rd, it.ActionNamePreset)
			}
		default:
			rd.Fail(errNotRead)
		}
	}
}

func readLocation(rd *strictjson.Reader, l *Location) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "segment":
			if !rd.Null() {
				l.Segment = rd.Int()
			}
		case "span":
			// Span decodes itself, so a null span is refused there, not skipped.
			readSpan(rd, &l.Span)
		default:
			rd.Fail(errNotRead)
		}
	}
}

// readCandidate is Candidate.UnmarshalJSON, refusals included (they fall back).
func readCandidate(rd *strictjson.Reader, c *Candidate) {
	rd.Object()
	var value Value
	for {
		name, ok := rd.Member()
		if !ok {
			break
		}
		switch string(name) {
		case "field":
			readString(rd, &c.Field)
		case "segment":
			c.Segment = readIntPtr(rd)
		case "span":
			c.Span = readSpanPtr(rd)
		case "value":
			readValue(rd, &value)
		default:
			rd.Fail(errNotRead)
		}
	}
	if !value.Set || (c.Segment == nil) != (c.Span == nil) {
		rd.Fail(errNotRead)
	}
	c.Value = value.V
}

func readAnswer(rd *strictjson.Reader, a *Answer) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "question_id":
			readString(rd, &a.QuestionID)
		case "value":
			readValue(rd, &a.Value)
		case "approved":
			a.Approved = nil
			if !rd.Null() {
				b := rd.Bool()
				a.Approved = &b
			}
		case "segment":
			a.Segment = readIntPtr(rd)
		case "span":
			a.Span = readSpanPtr(rd)
		default:
			rd.Fail(errNotRead)
		}
	}
}

func readPreSet(rd *strictjson.Reader, p *PreSet) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "value":
			readValue(rd, &p.Value)
		case "trust":
			readString(rd, &p.Trust)
		case "origin":
			readString(rd, &p.Origin)
		default:
			rd.Fail(errNotRead)
		}
	}
}

func readCheckItem(rd *strictjson.Reader, it *RequestCheckItem) {
	rd.Object()
	for {
		name, ok := rd.Member()
		if !ok {
			return
		}
		switch string(name) {
		case "id":
			readString(rd, &it.ID)
		case "description":
			readString(rd, &it.Description)
		case "expr":
			readString(rd, &it.Expr)
		case "kind":
			readString(rd, &it.Kind)
		case "status":
			readString(rd, &it.Status)
		default:
			rd.Fail(errNotRead)
		}
	}
}
