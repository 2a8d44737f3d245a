// Compile-time signatures of the Android API surface that the UniFFI-generated Kotlin (Android
// flavour) and bindings/kotlin use, for the Kotlin suite's Android-flavour compile check
// (tests/bindings/kotlin-tools.sh). No behaviour: bodies throw as android.jar's own stubs do, and
// nothing compiled against them is run. Public shapes are the Android SDK's (API level 33+).
package android.system;

public final class SystemCleaner {
    SystemCleaner() {
        throw new RuntimeException("Stub!");
    }

    public static java.lang.ref.Cleaner cleaner() {
        throw new RuntimeException("Stub!");
    }
}
