package cache

import "context"

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
			for s.writeCtx.Err() == nil {
				select {
				case req := <-s.queue:
					s.writeBatch(s.fill(append(batch[:0], req)))
				default:
					return
				}
			}
			return
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
func (s *Store) writeBatch(batch []writeReq) {
	ctx, cancel := context.WithTimeout(s.writeCtx, s.cfg.WriteTimeout)
	defer cancel()
	s.back.write(ctx, batch, s.now(), s.settle)
}
