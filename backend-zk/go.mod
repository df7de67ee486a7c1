module github.com/simba-go/simba/backend-zk

go 1.25.0

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/simba-go/simba/core v0.1.0
	go.uber.org/goleak v1.3.0
)

replace github.com/simba-go/simba/core => ../core
