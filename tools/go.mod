module github.com/simba-go/simba/tools

go 1.25

require github.com/simba-go/simba/core v0.0.0-00010101000000-000000000000

replace github.com/simba-go/simba/core => ../core
