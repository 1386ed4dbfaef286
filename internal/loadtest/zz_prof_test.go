package loadtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/sim"
)

func TestZZProfile(t *testing.T) {
	kind := os.Getenv("ZZKIND")
	if kind == "" {
		t.Skip()
	}
	st, err := (&experiment{}).up(context.Background(), uniformShape(sim.Fault{}), kind, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	tg := newTarget(st.url, 16, false)
	defer tg.close()
	rec := newRecorder()
	rs := run(context.Background(), tg, plan{Concurrency: 16, Warmup: time.Second, Duration: 4 * time.Second, MaxRequests: 1e9, IDs: 1000, Timeout: 5 * time.Second}, rec, nil)
	s := rec.summary(rs.Window)
	t.Logf("%s rps %.0f p50 %.2f p99 %.2f", kind, s.RPS, s.Latency.P50, s.Latency.P99)
}

func TestZZOutageAlone(t *testing.T) {
	if os.Getenv("ZZOUT") == "" {
		t.Skip()
	}
	s, err := startSim(uniformShape(profileFast))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	url, stop, err := startService(context.Background(), s.url, os.Getenv("ZZREDIS"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	origin := time.Now()
	rec := newRecorder().withTimeline(origin)
	go func() {
		time.Sleep(3 * time.Second)
		s.sim.SetFault(sim.ServiceLogistics, sim.Fault{Hang: true})
	}()
	tg := newTarget(url, 1024, false)
	defer tg.close()
	run(context.Background(), tg, plan{Rate: 100, Duration: 11 * time.Second, MaxRequests: 1e9, IDs: 1000, Timeout: 5 * time.Second}, rec, nil)
	for _, sec := range rec.summary(time.Second).Timeline {
		t.Logf("%+v", sec)
	}
}
