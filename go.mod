module github.com/cloison/cloison

go 1.26
