import HTTP
public enum HTTPServerPlaceholder {}
