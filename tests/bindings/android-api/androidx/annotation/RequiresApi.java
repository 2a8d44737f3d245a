// Compile-time signatures of the Android API surface that the UniFFI-generated Kotlin (Android
// flavour) and bindings/kotlin use, for the Kotlin suite's Android-flavour compile check
// (tests/bindings/kotlin-tools.sh). No behaviour, and nothing compiled against it is run. The
// shape is androidx.annotation's (retention and targets as there; its @IntRange(from = 1) on the
// elements is left out).
package androidx.annotation;

import static java.lang.annotation.ElementType.CONSTRUCTOR;
import static java.lang.annotation.ElementType.FIELD;
import static java.lang.annotation.ElementType.METHOD;
import static java.lang.annotation.ElementType.PACKAGE;
import static java.lang.annotation.ElementType.TYPE;
import static java.lang.annotation.RetentionPolicy.CLASS;

import java.lang.annotation.Documented;
import java.lang.annotation.Retention;
import java.lang.annotation.Target;

@Documented
@Retention(CLASS)
@Target({TYPE, METHOD, CONSTRUCTOR, FIELD, PACKAGE})
public @interface RequiresApi {
    int value() default 1;

    int api() default 1;
}
