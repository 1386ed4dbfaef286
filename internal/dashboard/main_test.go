package dashboard

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: a stream that outlives its
// client or Close is exactly the bug that would hang a server's shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
