package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/contrail/contrail/dataplane/config"
	"github.com/contrail/contrail/dataplane/server"
)

// dataplaneLogger is the node's logger as the config file and flags ask:
// --log-level when given, else the file's trace or debug; without
// logtime the lines carry no time, with logtime_utc it is in UTC; with
// log_file they go to that file (appended to) instead of stderr. The
// closer closes the file.
func dataplaneLogger(level string, levelGiven bool, opts *config.Options, stderr io.Writer) (*slog.Logger, io.Closer, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, nil, err
	}
	if !levelGiven {
		switch {
		case opts.Trace:
			l = server.LevelTrace
		case opts.Debug:
			l = slog.LevelDebug
		}
	}
	out, closer := stderr, io.Closer(io.NopCloser(nil))
	if opts.LogFile != "" {
		f, err := os.OpenFile(opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return nil, nil, fmt.Errorf("log_file: %w", err)
		}
		out, closer = f, f
	}
	logTime, utc := opts.LogTime, opts.LogTimeUTC
	h := slog.NewTextHandler(out, &slog.HandlerOptions{Level: l, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.LevelKey && a.Value.Any() == server.LevelTrace {
			return slog.String(a.Key, "TRACE")
		}
		switch {
		case len(groups) > 0 || a.Key != slog.TimeKey:
			return a
		case !logTime:
			return slog.Attr{}
		case utc:
			return slog.Time(a.Key, a.Value.Time().UTC())
		}
		return a
	}})
	return slog.New(h), closer, nil
}
