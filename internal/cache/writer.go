package cache

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// maxBatch bounds the entries one round trip carries.
const maxBatch = 64

// runWriter writes batches until Close, then empties the queue unless Close
// has given up on it. Close waits for it.
func (s *Store) runWriter() {
	batch := make([]writeReq, 0, maxBatch)
	for {
		select {
		case req := <-s.queue:
			s.writeBatch(s.fill(append(batch[:0], req)))
		case <-s.draining:
			if s.writeCtx.Err() != nil || len(s.queue) == 0 {
				return
			}
		}
	}
}

// fill adds what else is queued, up to maxBatch, without waiting.
func (s *Store) fill(batch []writeReq) []writeReq {
	for len(batch) < maxBatch {
		select {
		case req := <-s.queue:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch writes one batch within WriteTimeout and settles each entry.
// The write is a trace of its own, "cache write" (the requests have
// ended), linked to the span of each request whose answer it stores.
func (s *Store) writeBatch(batch []writeReq) {
	ctx, cancel := context.WithTimeout(s.writeCtx, s.cfg.WriteTimeout)
	defer cancel()
	var links []trace.Link
	for _, req := range batch {
		if req.link.IsValid() && !slices.ContainsFunc(links, func(l trace.Link) bool { return l.SpanContext.Equal(req.link) }) {
			links = append(links, trace.Link{SpanContext: req.link})
		}
	}
	ctx, span := s.tracer.Start(ctx, "cache write", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("orderagg.dependency", "cache"), attribute.Int("orderagg.cache.entries", len(batch))))
	defer span.End()
	s.back.write(ctx, batch, s.now(), func(req writeReq, stored bool, err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		s.settle(req, stored, err)
	})
}
