import Postgres
public enum AdTallyPlaceholder {}
