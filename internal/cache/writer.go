package cache

import (
	"context"
	"sync/atomic"
	"time"
)

// runWriter writes queued entries until Close, then empties the queue unless
// Close has given up on it. The Store owns it: Close waits for it.
func (s *Store) runWriter() {
	defer s.writers.Done()
	for {
		select {
		case req := <-s.queue:
			s.write(req)
		case <-s.draining:
			for s.writeCtx.Err() == nil {
				select {
				case req := <-s.queue:
					s.write(req)
				default:
					return
				}
			}
			return
		}
	}
}

// write stores one entry with the newest-wins script within WriteTimeout.
// Failures are counted and logged at a bounded rate; no request ever sees
// them.
func (s *Store) write(req writeReq) {
	// Done after the outcome is counted, so Flush returns with Stats final.
	defer s.finishOne()
	k := key(s.cfg.KeyPrefix, req.dep, req.orderID)
	ctx, cancel := context.WithTimeout(s.writeCtx, s.cfg.WriteTimeout)
	stored, err := putScript.Run(ctx, s.client, []string{k},
		valueVersionArg, req.asOfUS, req.payload, req.ttlMS,
		s.now().Add(s.cfg.MaxFutureSkew).UnixMicro()).Int()
	cancel()
	switch {
	case err != nil:
		s.record(EventWriteError, req.dep)
		if ok, suppressed := s.errLog.allow(s.now()); ok {
			s.log.Warn("last-good cache write failed; the entry is lost, requests are unaffected",
				"key", k, "error", err, "suppressed_since_last", suppressed)
		}
	case stored == 1:
		s.record(EventWriteOK, req.dep)
	default:
		s.record(EventWriteStale, req.dep)
	}
}

// logLimiter lets one log line through per interval and counts the others,
// so an outage costs one line every few seconds instead of one per write.
type logLimiter struct {
	every      time.Duration
	last       atomic.Int64 // Unix nanoseconds of the last line let through; 0 for none
	suppressed atomic.Uint64
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back since the last one.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed uint64) {
	n := now.UnixNano()
	last := l.last.Load()
	if (last != 0 && n-last < int64(l.every)) || !l.last.CompareAndSwap(last, n) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
