// Package api holds StartLux's wire API: what travels over the daemon's
// socket, as Go types. It names the methods ([MethodDecide] ...), their
// params ([LoadParams], a decision [Request]) and results ([Status],
// [ModelEntry], a decision [Response], [BatchResult]), the error codes
// ([Code], [Error]) and the models folder both sides agree on
// ([ModelsDir]). docs/protocol.md is the same contract in words.
//
// The daemon fills these types in, and the menu-bar app, the command line
// and any other Go client read them, through package ipc, which carries
// them. The package imports no other package of the module, so a client
// that needs a typed status or decision links no engine.
//
// Types encode with their json tags, both as JSON and as msgpack (ipc's
// encoder reads json tags). The ordered maps of the protocol (a request's
// questions, a choice question's options, a response's answers) are slices
// that encode as maps in their order.
package api
