package telemetry

import "github.com/orderagg/orderagg/internal/cache"

// CacheStats must stay convertible from the store's own snapshot, so that
// main wires ObserveCache with a plain conversion and a change to one side
// fails here rather than in production.
var _ = CacheStats(cache.Stats{})
