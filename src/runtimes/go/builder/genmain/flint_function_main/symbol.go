package main

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
)

// The function types a symbol may have (or be convertible to).
type (
	plainFunc   = func(http.ResponseWriter, *http.Request)
	contextFunc = func(context.Context, http.ResponseWriter, *http.Request)
)

var (
	plainFuncType   = reflect.TypeOf(plainFunc(nil))
	contextFuncType = reflect.TypeOf(contextFunc(nil))
)

const acceptedTypes = "http.Handler, http.HandlerFunc, func(http.ResponseWriter, *http.Request) or func(context.Context, http.ResponseWriter, *http.Request)"

// asHandler turns a plugin symbol into a handler. plugin.Lookup gives a
// function as its value and a variable as a pointer to it, so
// `var Handler http.Handler = ...` arrives as *http.Handler and
// `var Handler = http.NewServeMux()` as **http.ServeMux.
func asHandler(sym any) (http.Handler, error) {
	rv := reflect.ValueOf(sym)
	if !rv.IsValid() {
		return nil, fmt.Errorf("is nil; want %s", acceptedTypes)
	}
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		// A variable that holds a reference (an interface, a function, a
		// pointer): the handler is what it holds. A struct variable is used
		// through its pointer, so methods with pointer receivers count.
		elem := rv.Elem()
		switch elem.Kind() {
		case reflect.Interface, reflect.Func, reflect.Pointer, reflect.Map, reflect.Chan, reflect.Slice:
			if elem.IsNil() {
				return nil, fmt.Errorf("is a variable of type %s that is nil", elem.Type())
			}
			if elem.Kind() == reflect.Interface {
				elem = elem.Elem()
			}
			if h := direct(elem.Interface()); h != nil {
				return h, nil
			}
			if h := converted(elem); h != nil {
				return h, nil
			}
		}
	}
	if h := direct(sym); h != nil {
		return h, nil
	}
	if h := converted(rv); h != nil {
		return h, nil
	}
	return nil, fmt.Errorf("has type %T; want %s", sym, acceptedTypes)
}

func direct(v any) http.Handler {
	switch f := v.(type) {
	case http.Handler:
		return f
	case plainFunc:
		return http.HandlerFunc(f)
	case contextFunc:
		return contextHandler(f)
	}
	return nil
}

// converted handles a function of a named type with one of the accepted
// signatures (type MyFunc func(http.ResponseWriter, *http.Request)).
func converted(v reflect.Value) http.Handler {
	if v.Kind() != reflect.Func || v.IsNil() {
		return nil
	}
	switch {
	case v.Type().ConvertibleTo(plainFuncType):
		return http.HandlerFunc(v.Convert(plainFuncType).Interface().(plainFunc))
	case v.Type().ConvertibleTo(contextFuncType):
		return contextHandler(v.Convert(contextFuncType).Interface().(contextFunc))
	}
	return nil
}

func contextHandler(f contextFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f(r.Context(), w, r) })
}
