package workshop

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// noteHandler turns the load runner's log lines into notes on the run's
// stream. A note carries the line as the terminal would print it
// ("message") and, for the page to say it in its own language, the line's
// event ("cell done", "node fault", …) and its fields by key.
type noteHandler struct {
	run   *workshopRun
	attrs []slog.Attr
}

func (h *noteHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *noteHandler) Handle(_ context.Context, rec slog.Record) error {
	as := slices.Clone(h.attrs)
	rec.Attrs(func(a slog.Attr) bool {
		as = append(as, a)
		return true
	})
	h.run.emit(noteEvent(rec.Message, as...))
	return nil
}

func (h *noteHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &noteHandler{run: h.run, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *noteHandler) WithGroup(string) slog.Handler { return h }

// noteEvent is a note on a run's stream: the English line, its event and
// its fields.
func noteEvent(name string, as ...slog.Attr) event {
	msg := name
	fields := map[string]any{}
	for _, a := range as {
		msg += " " + a.String()
		fields[a.Key] = fieldValue(a.Value)
	}
	return event{"type": "note", "message": msg, "event": name, "fields": fields}
}

// fieldValue is a log value as JSON carries it: numbers and booleans as
// they are, a duration and anything else as its text.
func fieldValue(v slog.Value) any {
	switch v = v.Resolve(); v.Kind() {
	case slog.KindInt64:
		return v.Int64()
	case slog.KindUint64:
		return v.Uint64()
	case slog.KindFloat64:
		return v.Float64()
	case slog.KindBool:
		return v.Bool()
	case slog.KindDuration:
		return v.Duration().Round(time.Millisecond).String()
	default:
		return v.String()
	}
}
