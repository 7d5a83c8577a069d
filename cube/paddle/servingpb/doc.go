// Package servingpb holds Paddle Serving 0.9.0's messages: the configuration files its C++
// server reads and the prediction service's requests and responses. The .proto files here
// restate the upstream schemas from ../shared/reference/paddle-serving.md (fields this project
// writes or reads); the .pb.go files are generated from them by internal/genproto
// (make generate), and make test checks that they are current.
package servingpb
