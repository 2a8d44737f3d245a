// Compile-time signatures of the Android API surface that the UniFFI-generated Kotlin (Android
// flavour) and bindings/kotlin use, for the Kotlin suite's Android-flavour compile check
// (tests/bindings/kotlin-tools.sh). No behaviour: bodies throw as android.jar's own stubs do, and
// nothing compiled against them is run. Public shapes and constant values are the Android SDK's.
package android.os;

public class Build {
    public Build() {
        throw new RuntimeException("Stub!");
    }

    public static class VERSION {
        public VERSION() {
            throw new RuntimeException("Stub!");
        }

        /** Not a compile-time constant: read on the device. */
        public static final int SDK_INT;

        static {
            SDK_INT = 0;
        }
    }

    public static class VERSION_CODES {
        public VERSION_CODES() {
            throw new RuntimeException("Stub!");
        }

        public static final int UPSIDE_DOWN_CAKE = 34;
    }
}
