module github.com/simba-go/simba/tools/chaos

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/simba-go/simba/backend-jdbc v0.1.0
	github.com/simba-go/simba/backend-redis v0.1.0
	github.com/simba-go/simba/backend-zk v0.1.0
	github.com/simba-go/simba/core v0.1.0
	github.com/simba-go/simba/tools v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.48.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/simba-go/simba/backend-jdbc => ../../backend-jdbc
	github.com/simba-go/simba/backend-redis => ../../backend-redis
	github.com/simba-go/simba/backend-zk => ../../backend-zk
	github.com/simba-go/simba/core => ../../core
	github.com/simba-go/simba/tools => ../
)
