// Package bench compares orderagg's resilience guard (internal/resilience)
// with peer libraries: failsafe-go, afex/hystrix-go, sony/gobreaker and a
// hand-rolled floor. It is a separate module so that the peers never enter
// the service's go.mod; everything lives in its _test.go files.
//
// Run: go test -run '^$' -bench . -benchmem -count 5 -cpu 1,2 | tee results.txt
package bench
