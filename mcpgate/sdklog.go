package mcpgate

import (
	"context"
	"log/slog"
)

// atLeast passes on the records of h at min or above and drops the rest.
//
// The MCP library logs a session's start and end at info level. Over stateless HTTP every
// request is a session of its own, so those lines would be two or three per tool call, a fifth
// of the read pass-through's logging and formatting for nothing an operator reads: the server
// of stateless requests logs through this at warning level. Sessions of earlier revisions and
// stdio keep their lines.
type atLeast struct {
	min slog.Level
	h   slog.Handler
}

func (a atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= a.min && a.h.Enabled(ctx, l)
}

func (a atLeast) Handle(ctx context.Context, r slog.Record) error { return a.h.Handle(ctx, r) }

func (a atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{a.min, a.h.WithAttrs(attrs)}
}

func (a atLeast) WithGroup(name string) slog.Handler { return atLeast{a.min, a.h.WithGroup(name)} }
