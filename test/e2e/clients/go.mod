module outrigger.test/explicit-client

go 1.22
