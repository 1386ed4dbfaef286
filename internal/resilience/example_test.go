package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// A guard per dependency, built once; each call passes the request's context,
// whose deadline caps the dependency's own sub-budget.
func Example() {
	inventory, err := resilience.New("inventory", resilience.Config{
		Timeout:  600 * time.Millisecond,
		Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 50},
		Retry:    resilience.RetryConfig{MaxAttempts: 1},
	})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()

	stock, err := resilience.Do(ctx, inventory, func(ctx context.Context) (int, error) {
		return 0, errors.New("503 Service Unavailable") // the dependency is sick
	})
	switch {
	case err == nil:
		fmt.Println("in stock:", stock)
	case errors.Is(err, resilience.ErrFailure), errors.Is(err, resilience.ErrTimeout):
		// Degrade with meaning: "unknown", never 0.
		fmt.Println("stock unknown:", resilience.KindOf(err))
	}
	// Output: stock unknown: failure
}
