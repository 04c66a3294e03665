package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/contrail/contrail/controlplane/usage"
)

// UsageHistory serves sampled usage; *usage.Sampler is the real one.
type UsageHistory interface {
	History(accountID string, since time.Time) ([]usage.Sample, error)
}

// historyWindows are the windows the history route serves.
var historyWindows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour}

// point is one x/y pair of a series: x in unix seconds.
type point struct {
	X int64  `json:"x"`
	Y uint64 `json:"y"`
}

type historyView struct {
	Window          string    `json:"window"`
	IntervalSeconds int64     `json:"interval_seconds"`
	From            time.Time `json:"from"`
	To              time.Time `json:"to"`
	Series          struct {
		StorageBytes []point `json:"storage_bytes"`
		MemoryBytes  []point `json:"memory_bytes"`
		Messages     []point `json:"messages"`
		Connections  []point `json:"connections"`
		Streams      []point `json:"streams"`
		Consumers    []point `json:"consumers"`
	} `json:"series"`
}

// query returns a query parameter given at most once; a repeated one
// is a 400 (which of two values would be meant is a guess).
func query(c echo.Context, name string) (string, error) {
	vs := c.QueryParams()[name]
	if len(vs) > 1 {
		return "", invalid(name, "must be given once")
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

func (s *Server) usageHistory(c echo.Context) error {
	window, err := query(c, "window")
	if err != nil {
		return err
	}
	if window == "" {
		window = "1h"
	}
	span, ok := historyWindows[window]
	if !ok {
		return invalid("window", "must be 1h or 24h")
	}
	a, err := s.account(c)
	if err != nil {
		return err
	}
	now := s.Now().UTC().Truncate(time.Second)
	out := historyView{Window: window, IntervalSeconds: int64(s.UsageInterval / time.Second), From: now.Add(-span), To: now}
	var samples []usage.Sample
	if s.Usage != nil {
		if samples, err = s.Usage.History(a.ID, out.From); err != nil {
			return err
		}
	}
	ser := &out.Series
	for _, v := range []*[]point{&ser.StorageBytes, &ser.MemoryBytes, &ser.Messages, &ser.Connections, &ser.Streams, &ser.Consumers} {
		*v = make([]point, 0, len(samples))
	}
	for _, smp := range samples {
		x := smp.At.Unix()
		ser.StorageBytes = append(ser.StorageBytes, point{x, smp.StorageBytes})
		ser.MemoryBytes = append(ser.MemoryBytes, point{x, smp.MemoryBytes})
		ser.Messages = append(ser.Messages, point{x, smp.Messages})
		ser.Connections = append(ser.Connections, point{x, uint64(smp.Connections)})
		ser.Streams = append(ser.Streams, point{x, uint64(smp.Streams)})
		ser.Consumers = append(ser.Consumers, point{x, uint64(smp.Consumers)})
	}
	return c.JSON(http.StatusOK, out)
}

// Paging of lists the console shows page by page.
const (
	defaultPageLimit = 50
	maxPageLimit     = 1000
)

// page is a paged list: the items of one page and the total count.
type page[T any] struct {
	Items  []T `json:"items"`
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// paged cuts all to the page the request's offset and limit name. The
// one place query paging is parsed: both bounds are checked, so no
// value can index outside all.
func paged[T any](c echo.Context, all []T) (page[T], error) {
	offset, limit := 0, defaultPageLimit
	ov, err := query(c, "offset")
	if err != nil {
		return page[T]{}, err
	}
	lv, err := query(c, "limit")
	if err != nil {
		return page[T]{}, err
	}
	if v := ov; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return page[T]{}, invalid("offset", "must be a whole number, 0 or more")
		}
		offset = n
	}
	if v := lv; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageLimit {
			return page[T]{}, invalid("limit", "must be a whole number from 1 to "+strconv.Itoa(maxPageLimit))
		}
		limit = n
	}
	p := page[T]{Items: []T{}, Total: len(all), Offset: offset, Limit: limit}
	if offset < len(all) {
		p.Items = all[offset:min(len(all), offset+limit)]
	}
	return p, nil
}
