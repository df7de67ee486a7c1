module github.com/simba-go/simba/fxsimba/example

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/simba-go/simba/backend-redis v0.1.0
	github.com/simba-go/simba/core v0.1.0
	github.com/simba-go/simba/fxsimba v0.1.0
	go.uber.org/fx v1.24.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
)

replace (
	github.com/simba-go/simba/backend-redis => ../../backend-redis
	github.com/simba-go/simba/core => ../../core
	github.com/simba-go/simba/fxsimba => ..
)
