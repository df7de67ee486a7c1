module github.com/simba-go/simba/core

go 1.25.0

require go.uber.org/goleak v1.3.0
