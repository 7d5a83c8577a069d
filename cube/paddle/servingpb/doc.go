// Package servingpb holds Paddle Serving 0.9.0's messages: the configuration files its C++
// server reads and the prediction service's requests and responses. serving.proto
// restates the upstream schemas from ../shared/reference/paddle-serving.md (fields this project
// writes or reads); serving.pb.go is generated from it by internal/genproto
// (make generate), and make test checks that they are current.
package servingpb
