package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's logging to slog. Raft's info, warn
// and error lines keep their level; its debug and trace lines are dropped
// (they describe every RPC and would drown the node's own log). The
// adapter's level is fixed: raft's SetLevel calls are ignored so that
// nothing below info reaches slog.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []any
}

// newHclog returns an hclog.Logger writing to log.
func newHclog(log *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: log, name: name}
}

func slogLevel(l hclog.Level) (slog.Level, bool) {
	switch l {
	case hclog.Info:
		return slog.LevelInfo, true
	case hclog.Warn:
		return slog.LevelWarn, true
	case hclog.Error:
		return slog.LevelError, true
	default:
		return 0, false
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	l, ok := slogLevel(level)
	if !ok || !a.log.Enabled(context.Background(), l) {
		return
	}
	out := make([]any, 0, len(args)+2)
	for _, v := range args {
		// hclog.Fmt defers formatting to the logger.
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				v = fmt.Sprintf(format, f[1:]...)
			}
		}
		out = append(out, v)
	}
	if a.name != "" {
		out = append(out, "component", a.name)
	}
	a.log.Log(context.Background(), l, msg, out...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) {}
func (a *hclogAdapter) Debug(msg string, args ...any) {}
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return false }
func (a *hclogAdapter) IsDebug() bool                 { return false }
func (a *hclogAdapter) IsInfo() bool                  { return a.log.Enabled(context.Background(), slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool                  { return a.log.Enabled(context.Background(), slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool                 { return a.log.Enabled(context.Background(), slog.LevelError) }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.implied }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(hclog.Level)          {}
func (a *hclogAdapter) GetLevel() hclog.Level         { return hclog.Info }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{log: a.log.With(args...), name: a.name, implied: append(append([]any(nil), a.implied...), args...)}
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return &hclogAdapter{log: a.log, name: name, implied: a.implied}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{log: a.log, name: name, implied: a.implied}
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{a}
}

// slogWriter turns the lines of a standard logger into info records.
type slogWriter struct{ a *hclogAdapter }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if n := len(msg); n > 0 && msg[n-1] == '\n' {
		msg = msg[:n-1]
	}
	w.a.Info(msg)
	return len(p), nil
}
