import CLibPQ
public enum PostgresPlaceholder {}
