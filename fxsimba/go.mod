module github.com/simba-go/simba/fxsimba

go 1.25.0

require (
	github.com/simba-go/simba/core v0.1.0
	go.uber.org/fx v1.24.0
	go.uber.org/goleak v1.3.0
)

require (
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	golang.org/x/sys v0.0.0-20220412211240-33da011f77ad // indirect
)

replace github.com/simba-go/simba/core => ../core
