module github.com/orderagg/orderagg/bench

go 1.26.8

require (
	github.com/afex/hystrix-go v0.0.0-20180502004556-fa1af6a1f4f5
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/orderagg/orderagg v0.0.0
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/smartystreets/goconvey v1.8.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
)

replace github.com/orderagg/orderagg => ../
